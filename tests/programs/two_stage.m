function beta = two_stage(X, Z, y)
  % two-stage least squares
  % test inputs: X=randn(30,3) Z=randn(30,3) y=randn(30,1)
  Xhat = Z * ((Z' * Z) \ (Z' * X));
  beta = (Xhat' * X) \ (Xhat' * y);
end
