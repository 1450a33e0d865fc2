function [L, e, y] = laplacian(W, x)
  % the Laplacian of a weighted graph, its quadratic form and one smoothing step
  % test inputs: W=rand(8,8) x=randn(8,1)
  L = diag(sum(W, 2)) - W;
  e = x' * L * x;
  y = x - 0.1 * L * x;
end
