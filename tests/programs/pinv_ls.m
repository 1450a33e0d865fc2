function [beta, yhat] = pinv_ls(X, y)
  % least squares through the pseudo-inverse
  % test inputs: X=randn(20,4) y=randn(20,1)
  beta = pinv(X) * y;
  yhat = X * beta;
end
