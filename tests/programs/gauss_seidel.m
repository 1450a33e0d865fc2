function x = gauss_seidel(A, b, x0)
  % 6 Gauss-Seidel sweeps: (D + L) x_new = b - U x
  % test inputs: A=diagdom(5) b=randn(5,1) x0=randn(5,1)
  L = tril(A);
  U = triu(A) - diag(diag(A));
  x = x0;
  for i = 1:6
    x = L \ (b - U * x);
  end
end
