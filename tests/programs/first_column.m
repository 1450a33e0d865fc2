function [c, s, t] = first_column(X)
  % columns and entries by index
  % test inputs: X=randn(8,5)
  c = X(:, 1) + X(:, end);
  s = X(2, 3) * X(:, 2);
  t = X(2:end, 2:4) - X(1:end-1, 2:4);
end
