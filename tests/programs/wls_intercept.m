function beta = wls_intercept(X, y, w)
  % weighted least squares with an intercept
  % test inputs: X=randn(30,3) y=randn(30,1) w=rand(30,1)
  %#linview dynamic X y
  m = length(y);
  Z = [ones(m, 1) X];
  W = diag(w);
  beta = (Z' * W * Z) \ (Z' * W * y);
end
