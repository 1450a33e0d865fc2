function [Z, mu, sigma, C, v] = standardize(X)
  % feature normalisation as machine-learning courses write it
  % test inputs: X=randn(25,4)
  mu = mean(X);
  sigma = std(X);
  Z = (X - repmat(mu, size(X, 1), 1)) ./ repmat(sigma, size(X, 1), 1);
  C = cov(X);
  v = var(X(:, 1));
end
