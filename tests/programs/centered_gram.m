function K = centered_gram(X)
  % a centred Gram (kernel) matrix
  % test inputs: X=randn(10,6)
  n = rows(X);
  H = eye(n) - ones(n, n) / n;
  K = H * (X * X') * H;
end
