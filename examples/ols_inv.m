% OLS_INV  Ordinary least squares with an explicit inverse.
%   beta = inv(X'X) X'Y, the same model as ols.m; the inverse of the Gram
%   matrix X'X is a view that linview maintains by Sherman-Morrison/Woodbury.

function beta = ols_inv(X, Y)
  %#linview dims X(m,n) Y(m,p)
  %#linview dynamic X Y
  beta = inv(X' * X) * X' * Y;
end
