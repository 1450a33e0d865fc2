function Y = matpoly(A)
  % a matrix polynomial 2 I + 3 A + A^2 - 0.5 A^3
  % test inputs: A=contraction(5)
  n = rows(A);
  Y = 2 * eye(n) + 3 * A + A^2 - 0.5 * A^3;
end
