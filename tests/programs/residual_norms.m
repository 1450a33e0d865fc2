function [b, n1, n2, ninf] = residual_norms(X, y)
  % least squares and the norms of its residual
  % test inputs: X=randn(20,3) y=randn(20,1)
  b = (X' * X) \ (X' * y);
  r = y - X * b;
  n1 = norm(r, 1);
  n2 = norm(r);
  ninf = norm(r, Inf);
end
