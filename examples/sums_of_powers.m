% SUMS_OF_POWERS  Truncated geometric (Neumann) series of a matrix.
%   S = I + A + A^2 + ... + A^15, accumulated with a loop that keeps the
%   current power P = A^i.

function S = sums_of_powers(A)
  %#linview dims A(n,n)
  n = size(A, 1);
  P = A;
  S = eye(n) + A;
  for i = 2:15
    P = P * A;
    S = S + P;
  end
end
