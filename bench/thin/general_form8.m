% GENERAL_FORM8  Eight steps of T <- A*T + B with one column (thin iterate).
function T = general_form8(A, B, T0)
  %#linview dims A(n,n) B(n,1) T0(n,1)
  %#linview dynamic A
  T = T0;
  for i = 1:8
    T = A * T + B;
  end
end
