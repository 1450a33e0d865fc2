% OLS  Ordinary least squares through the normal equations.
%   beta = argmin ||X*beta - Y||, i.e. the solution of (X'X) beta = X'Y,
%   for m observations (rows of X and Y), n features and p responses.

function beta = ols(X, Y)
  %#linview dims X(m,n) Y(m,p)
  %#linview dynamic X Y
  beta = (X' * X) \ (X' * Y);
end
