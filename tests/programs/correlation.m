function R = correlation(X)
  % correlation matrix from the covariance
  % test inputs: X=randn(40,4)
  n = rows(X);
  Xc = X - ones(n, 1) * mean(X);
  C = Xc' * Xc / (n - 1);
  s = sqrt(diag(C));
  R = C ./ (s * s');
end
