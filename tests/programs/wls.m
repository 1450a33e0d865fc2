function beta = wls(X, y, w)
  % weighted least squares with weights w
  % test inputs: X=randn(25,4) y=randn(25,1) w=rand(25,1)
  W = diag(w);
  beta = (X' * W * X) \ (X' * W * y);
end
