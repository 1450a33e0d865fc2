% GRADIENT_DESCENT5  Five steps of gradient descent on least squares (thin iterate).
function theta = gradient_descent5(X, Y, theta0, alpha)
  %#linview dims X(m,n) Y(m,1) theta0(n,1)
  %#linview scalar alpha
  %#linview dynamic X
  theta = theta0;
  for i = 1:5
    theta = theta - alpha * X' * (X * theta - Y);
  end
end
