function w = gradient_descent_ls(X, y)
  % gradient descent on least squares, fixed step
  % test inputs: X=randn(30,4) y=randn(30,1)
  w = zeros(columns(X), 1);
  G = X' * X;
  c = X' * y;
  for i = 1:8
    w = w - 0.01 * (G * w - c);
  end
end
