function K = kron_sum(A, B)
  % Kronecker sum A (+) B
  % test inputs: A=randn(3,3) B=randn(2,2)
  K = kron(A, eye(2)) + kron(eye(3), B);
end
