function [v1, v2, s0, c1, r] = stats_dims(X, t)
  % var and std along either dimension, normalised either way; cov of a row
  % test inputs: X=randn(12,5) t=randn(1,9)
  v1 = var(X, 1);
  v2 = var(X, 0, 2);
  s0 = std(X, [], 2);
  c1 = cov(X, 1);
  r = [var(t) std(t) cov(t)];
end
