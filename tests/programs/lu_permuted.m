function [x, L, G] = lu_permuted(A, B, b)
  % [L, U] = lu(A) (L row-permuted) next to a maintained Gram matrix
  % test inputs: A=randn(5,5) B=randn(8,5) b=randn(5,1)
  [L, U] = lu(A);
  x = U \ (L \ b);
  G = B' * B + A;
end
