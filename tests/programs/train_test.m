function err = train_test(X, y)
  % fit on the first 20 rows, residual on the rest
  % test inputs: X=randn(30,3) y=randn(30,1)
  Xtr = X(1:20, :);
  ytr = y(1:20);
  b = (Xtr' * Xtr) \ (Xtr' * ytr);
  err = y(21:end) - X(21:end, :) * b;
end
