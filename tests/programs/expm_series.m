function S = expm_series(A)
  % a truncated matrix exponential: the terms T = A^k / k!
  % test inputs: A=contraction(5)
  n = rows(A);
  T = eye(n);
  S = T;
  for k = 1:8
    T = T * A / k;
    S += T;
  end
end
