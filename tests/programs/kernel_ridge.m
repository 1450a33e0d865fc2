function [alpha, f] = kernel_ridge(X, y, lambda)
  % kernel ridge regression with a linear kernel
  % test inputs: X=randn(20,5) y=randn(20,1) lambda=0.5
  K = X * X';
  alpha = (K + lambda * eye(rows(X))) \ y;
  f = K * alpha;
end
