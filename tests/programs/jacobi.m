function x = jacobi(A, b)
  % 10 Jacobi sweeps for A x = b
  % test inputs: A=diagdom(6) b=randn(6,1)
  %#linview dynamic b
  d = diag(A);
  R = A - diag(d);
  x = zeros(rows(A), 1);
  for i = 1:10
    x = (b - R * x) ./ d;
  end
end
