function [beta, r] = ls_intercept(X, y)
  % least squares with an intercept column, written the usual way
  % test inputs: X=randn(40,3) y=randn(40,1)
  Z = [ones(rows(X), 1) X];
  beta = Z \ y;
  r = y - Z * beta;
end
