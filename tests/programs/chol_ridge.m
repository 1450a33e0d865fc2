function beta = chol_ridge(X, y)
  % ridge through a Cholesky factor
  % test inputs: X=randn(25,4) y=randn(25,1)
  R = chol(X' * X + 0.5 * eye(columns(X)));
  beta = R \ (R' \ (X' * y));
end
