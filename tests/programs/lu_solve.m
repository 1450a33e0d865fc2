function [x, L, U, P] = lu_solve(A, b)
  % a linear solve through the pivoted factors P*A = L*U
  % test inputs: A=randn(6,6) b=randn(6,2)
  [L, U, P] = lu(A);
  x = U \ (L \ (P * b));
end
