function beta = ols_intercept(X, y)
  % normal equations with an intercept column
  % test inputs: X=randn(30,3) y=randn(30,1)
  Z = [ones(rows(X), 1), X];
  beta = (Z' * Z) \ (Z' * y);
end
