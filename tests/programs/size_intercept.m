function beta = size_intercept(X, y)
  % normal equations with an intercept column sized by [n, p] = size(X)
  % test inputs: X=randn(20,3) y=randn(20,1)
  [n, p] = size(X);
  Z = [ones(n, 1), X];
  beta = (Z' * Z + 0.1 * eye(p + 1)) \ (Z' * y);
end
