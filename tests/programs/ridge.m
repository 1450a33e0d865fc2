function beta = ridge(X, y, lambda)
  % ridge regression: (X'X + lambda I) \ X'y
  % test inputs: X=randn(30,5) y=randn(30,1) lambda=0.5
  p = columns(X);
  beta = (X' * X + lambda * eye(p)) \ (X' * y);
end
