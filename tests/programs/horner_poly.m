function P = horner_poly(A, c)
  % a matrix polynomial by Horner's rule, coefficients c(1) (highest) to c(end)
  % test inputs: A=contraction(5) c=randn(4,1)
  %#linview dynamic A
  n = rows(A);
  P = c(1) * eye(n);
  for k = 2:length(c)
    P = P * A + c(k) * eye(n);
  end
end
