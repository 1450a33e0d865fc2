function S = powers_sum(A)
  % I + A + A^2 + ... + A^6 by a recurrence
  % test inputs: A=contraction(5)
  n = rows(A);
  S = eye(n);
  for i = 1:6
    S = A * S + eye(n);
  end
end
