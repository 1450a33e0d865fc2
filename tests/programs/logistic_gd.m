function w = logistic_gd(X, y, w0)
  % 5 gradient steps of logistic regression
  % test inputs: X=randn(30,4) y=bits(30,1) w0=randn(4,1)
  %#linview dynamic X
  w = w0;
  for i = 1:5
    p = 1 ./ (1 + exp(-X * w));
    w = w + 0.1 * X' * (y - p);
  end
end
