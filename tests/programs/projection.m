function [yhat, r] = projection(X, y)
  % projection onto the column space of X, without Gram-Schmidt
  % test inputs: X=randn(20,3) y=randn(20,1)
  P = X * ((X' * X) \ X');
  yhat = P * y;
  r = y - yhat;
end
