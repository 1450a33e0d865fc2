% GRADIENT_DESCENT  Linear regression by batch gradient descent.
%   Ten steps theta <- theta - alpha * X' * (X*theta - Y) on the least-squares
%   loss 1/2 ||X*theta - Y||^2, starting from theta0, with step size alpha
%   (it converges for 0 < alpha < 2 / ||X||^2).

function theta = gradient_descent(X, Y, theta0, alpha)
  %#linview dims X(m,n) Y(m,1) theta0(n,1)
  %#linview scalar alpha
  %#linview dynamic X Y
  theta = theta0;
  for i = 1:10
    theta = theta - alpha * X' * (X * theta - Y);
  end
end
