function [x, z] = min_norm(A, b, B)
  % the minimum-norm solution of a wide system, and a right division
  % test inputs: A=randn(4,9) b=randn(4,1) B=randn(3,9)
  x = A \ b;
  z = B / A;
end
