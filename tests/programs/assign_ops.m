function [P, s] = assign_ops(A, b)
  % Octave's assignment operators on matrices and scalars
  % test inputs: A=contraction(5) b=randn(5,1)
  P = eye(rows(A));
  P *= A;
  P += A' * A;
  P /= 2;
  P -= 0.1 * eye(rows(A));
  s = b' * b;
  s *= 3;
  s /= numel(b);
end
