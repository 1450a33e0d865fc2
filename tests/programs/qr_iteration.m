function [T, d] = qr_iteration(A)
  % unshifted QR iteration towards the eigenvalues of a symmetric matrix
  % test inputs: A=spd(5)
  T = A;
  for i = 1:6
    [Q, R] = qr(T);
    T = R * Q;
  end
  d = diag(T);
end
