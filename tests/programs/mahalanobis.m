function d = mahalanobis(X, x)
  % squared Mahalanobis distance of x to the sample of X
  % test inputs: X=randn(30,3) x=randn(3,1)
  mu = mean(X)';
  Xc = X - mean(X);
  C = Xc' * Xc / (rows(X) - 1);
  d = (x - mu)' * (C \ (x - mu));
end
