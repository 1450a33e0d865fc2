function [A, B, C] = elementwise(X, Y)
  % elementwise functions on positive data
  % test inputs: X=rand(5,4) Y=rand(5,4)
  A = sqrt(X) .* Y + X .^ 2;
  B = log(1 + X) ./ (Y + 1);
  C = abs(X - Y) .^ 3;
end
