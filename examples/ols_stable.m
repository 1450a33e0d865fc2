function beta = ols_stable(X, Y)
  % Ordinary least squares in "stable mode": the solve keeps the Cholesky factor of X'*X
  % (the R of X = QR) by rank-1 updates and downdates instead of inv(X'*X).
  %#linview dims X(m,n) Y(m,p)
  %#linview solve cholesky
  beta = (X' * X) \ (X' * Y);
end
