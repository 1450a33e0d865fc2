function [m1, m2, m3, m4] = maxmin(X)
  % maxima and minima along dimensions
  % test inputs: X=randn(6,4)
  m1 = max(X);
  m2 = min(X, [], 2);
  m3 = max(abs(X), 0.5);
  m4 = min(X(:, 1));
end
