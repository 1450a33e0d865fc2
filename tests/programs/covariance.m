function C = covariance(X)
  % sample covariance
  % test inputs: X=randn(40,5)
  Xc = X - mean(X);
  C = Xc' * Xc / (rows(X) - 1);
end
