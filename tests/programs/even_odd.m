function [O, E, s] = even_odd(X, y)
  % odd and even samples of a signal matrix (subscripts with a step), and their products
  % test inputs: X=randn(12,4) y=randn(12,1)
  O = X(1:2:end, :);
  E = X(2:2:end, 1:3);
  s = O' * y(1:2:end) + [E, X(2:2:end, end)]' * y(2:2:end);
end
