% GENERAL_FORM  Sixteen steps of the linear recurrence T <- A*T + B.
%   Starting from T0 (which does not change), T_16 = A^16 T0 + (A^15 + ... + I) B.
%   A and B change by low-rank updates.

function T = general_form(A, B, T0)
  %#linview dims A(n,n) B(n,p) T0(n,p)
  %#linview dynamic A B
  T = T0;
  for i = 1:16
    T = A * T + B;
  end
end
