function beta = ols_stable(X, Y)
  % Ordinary least squares in "stable mode": the solve keeps the triangular factor of
  % X = QR (the Cholesky factor of X'*X) by rank-1 QR updates instead of inv(X'*X).
  %#linview dims X(m,n) Y(m,p)
  %#linview solve cholesky
  beta = (X' * X) \ (X' * Y);
end
