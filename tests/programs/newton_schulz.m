function X = newton_schulz(A)
  % Newton-Schulz iterations towards inv(A)
  % test inputs: A=wellcond(5)
  %#linview dynamic A
  n = rows(A);
  X = A' / (norm(A, 1) * norm(A, Inf));
  for i = 1:12
    X = X * (2 * eye(n) - A * X);
  end
end
