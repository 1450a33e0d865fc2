function S = lyapunov_terms(A, Q)
  % truncated sum of A^k Q A'^k
  % test inputs: A=contraction(4) Q=spd(4)
  S = Q;
  T = Q;
  for i = 1:5
    T = A * T * A';
    S = S + T;
  end
end
