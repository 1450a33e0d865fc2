function beta = block_ridge(X, W, y)
  % ridge on a block design, written with the block Gram matrix
  % test inputs: X=randn(20,3) W=randn(20,2) y=randn(20,1)
  G = [X' * X, X' * W; W' * X, W' * W];
  beta = (G + 0.1 * eye(rows(G))) \ [X' * y; W' * y];
end
