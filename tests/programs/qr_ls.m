function [beta, R, r] = qr_ls(X, y)
  % least squares through an economy QR factor, and its residual
  % test inputs: X=randn(30,4) y=randn(30,1)
  [Q, R] = qr(X, 0);
  beta = R \ (Q' * y);
  r = y - X * beta;
end
