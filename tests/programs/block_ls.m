function beta = block_ls(X, W, y)
  % least squares on a block design [X, W]
  % test inputs: X=randn(30,3) W=randn(30,2) y=randn(30,1)
  Z = [X, W];
  beta = (Z' * Z) \ (Z' * y);
end
