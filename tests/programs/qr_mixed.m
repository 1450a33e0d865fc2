function [C, Q, R, P] = qr_mixed(X, W)
  % maintained products around a full QR factor and a projection built from it
  % test inputs: X=randn(10,3) W=randn(10,10)
  C = X' * W * X;
  [Q, R] = qr(X);
  Q1 = Q(:, 1:3);
  P = Q1 * (Q1' * W);
end
