function [S, g] = outer_sum(X)
  % a Gram matrix accumulated column by column
  % test inputs: X=randn(6,4)
  S = zeros(rows(X));
  for i = 1:size(X, 2)
    S += X(:, i) * X(:, i)';
  end
  g = trace(S) / numel(X);
end
